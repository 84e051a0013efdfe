"""The layouts shipped with spf (TOML files and their packers), installed as ``spf.layouts``."""
