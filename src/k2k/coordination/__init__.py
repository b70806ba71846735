"""Control topics on the TARGET cluster: record formats, progress store, topic checks."""
