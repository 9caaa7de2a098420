"""Exercises of chapter 6."""
