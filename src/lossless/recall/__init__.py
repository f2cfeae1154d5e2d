"""Recall: retrieval units, vector indexing and hybrid keyword + vector search."""
