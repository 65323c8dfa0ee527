"""The Helm chart's side: its values schema, its objects as data, a release's size."""
