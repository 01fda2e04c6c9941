"""Graph workflow engine for Agent-Zero.

A pure core (``model``, ``library``, ``verify``, ``history``, ``matching``,
``state``, ``engine``, ``render``, ``salute``) and one Agent-Zero shell
(``adapter``) that the two extension files call.  Nothing here imports
Agent-Zero.
"""

__version__ = "2.2.0"
