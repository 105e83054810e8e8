"""TLS for every listener: the cluster CA and certificates (pki), SSL contexts and the
files they come from (contexts), the in-process TLS terminator in front of waitress
(terminator), and the kubeconfig a cluster's clients read (kubeconfig)."""
