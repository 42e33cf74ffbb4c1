"""The controllers of kube-controller-manager that simcluster runs."""
