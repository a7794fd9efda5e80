"""Subject rules and the Sublist trie (see tokens.py and sublist.py)."""
