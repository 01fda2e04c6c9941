"""What any host does around a step: the library it keeps, the run's audit log, the question to the utility model,
and one pass (``passes``) behind the ``port.Host`` protocol.  Imports the core and the texts, never a host."""
