"""Exercises of chapter 7."""
