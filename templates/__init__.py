"""The C templates of generated code, installed as ``spf.templates``."""
