"""The hosts that drive a session: ``agent_zero`` (the extension pack's hooks) and ``chat`` (a plain terminal chat)."""
