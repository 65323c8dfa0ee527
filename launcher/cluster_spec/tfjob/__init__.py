"""`python -m launcher import`: kubeflow.org/v1 TFJobs as cluster.yaml (convert.py maps the
fields, document.py reads the files and writes the YAML)."""
