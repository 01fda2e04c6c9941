"""Tooling around the engine, never installed into Agent-Zero: the ``graph-engine`` CLI, the installer, the
Agent-Zero stand-in used by the tests and the demo, simulation, rendering, explaining runs, the trigger report
and the prompt documents.  The runtime is the package above; nothing in it imports from here."""
