"""A terminal chat as a host of the session (``chat.ChatHost``); ``python -m graph_engine.hosts.chat``."""
