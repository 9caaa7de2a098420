"""Exercises of chapter 1."""
