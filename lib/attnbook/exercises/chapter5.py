"""Exercises of chapter 5."""
