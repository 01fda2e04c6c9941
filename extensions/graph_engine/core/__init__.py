"""The plan language and the step: pure, no I/O; imports nothing outside itself."""
