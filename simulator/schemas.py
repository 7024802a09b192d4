"""Identifiers of the JSON files one part of the project writes and another reads.

Shared here so a reader (the site) need not import the writer (the validation harness).
"""

VALIDATION_REPORT_SCHEMA = "vidur-specdec/validation-report"
