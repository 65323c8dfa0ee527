"""`python -m launcher import`: kubeflow.org/v1 TFJobs as cluster.yaml. convert.py maps a TFJob
(pod.py a replica's pod template, cluster.py the fields a cluster.yaml has once); document.py
reads the files and writes the commented YAML."""
