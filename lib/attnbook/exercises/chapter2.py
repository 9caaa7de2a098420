"""Exercises of chapter 2."""
