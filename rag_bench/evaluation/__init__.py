"""Scoring: ranking metrics, and (later) claims, judges, diagnosis and statistics."""
