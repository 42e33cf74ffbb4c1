"""The workload signals client (trainyard_signal.py: one file, copied into training images);
simcluster imports it from here."""
