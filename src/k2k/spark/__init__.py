"""Spark as k2k starts it: the session, the JVM's class-data archive, its log4j settings and
the Python worker daemon. Used by the pipeline's driver and by ``k2k verify``."""
