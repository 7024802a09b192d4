"""The static results site: recorded CSV in, HTML + plotly.js + CSV out, nothing computed in the browser."""
