"""The dashboard's files: one HTML page, its script and its style sheet, all hand-written here (no third-party
assets, nothing fetched from a CDN). app/api/routes/dashboard.py serves them."""
