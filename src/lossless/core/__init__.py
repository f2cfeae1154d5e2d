"""The core: types, errors, configuration, token counting, canonical ids, text fitting and the summary DAG's rules."""
