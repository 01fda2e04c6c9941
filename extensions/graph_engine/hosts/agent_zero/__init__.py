"""The Agent-Zero port: its hook calls read into a pass, the effects applied to the agent, its log and its web UI."""
