"""Exercises of chapter 8."""
