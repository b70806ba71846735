"""What tests import: builders, clients, processes and waits. Fixtures stay in conftest files,
so a test's imports say where a helper lives and a conftest never becomes a library."""
