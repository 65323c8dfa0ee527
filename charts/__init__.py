"""The Helm chart (charts/tfk8s/) ships as package data of this package, so the launcher finds its
files installed or in a checkout alike (launcher/chart/helm_release.py, importlib.resources)."""
