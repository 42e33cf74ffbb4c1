"""Kubeconfig validation: nothing that can run code or read files on the console's host."""

from __future__ import annotations

import pytest

from console.kubeconfig import KubeconfigRejected, server_of, validate_kubeconfig

SECRET = "sekr3t-token-value"


def kubeconfig(
    user: str = f"token: {SECRET}", cluster: str = "", server: str = "https://10.0.0.1:6443"
) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: "{server}"
    certificate-authority-data: LS0tLS1CRUdJTg==
    {cluster}
users:
- name: u
  user:
    {user}
contexts:
- name: ctx
  context: {{cluster: c, user: u, namespace: team-a}}
- name: other
  context: {{cluster: c, user: u}}
current-context: ctx
"""


def test_it_accepts_a_token_and_inline_data() -> None:
    config = validate_kubeconfig(kubeconfig())
    assert config["current-context"] == "ctx"
    assert validate_kubeconfig(
        kubeconfig("client-certificate-data: QQ==\n    client-key-data: QQ==")
    )


@pytest.mark.parametrize(
    ("user", "cluster", "named"),
    [
        ("exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}", "", "exec"),
        ("auth-provider: {name: oidc}", "", "auth-provider"),
        ("tokenFile: /etc/shadow", "", "tokenFile"),
        ("client-certificate: /root/.ssh/id_rsa", "", "client-certificate"),
        ("client-key: /root/.ssh/id_rsa", "", "client-key"),
        ("token: x", "certificate-authority: /etc/ssl/ca.pem", "certificate-authority"),
        ("token: x", "some-file: /etc/passwd", "some-file"),
    ],
)
def test_it_refuses_what_could_run_code_or_read_files(user: str, cluster: str, named: str) -> None:
    with pytest.raises(KubeconfigRejected, match=named):
        validate_kubeconfig(kubeconfig(user, cluster))


def test_it_refuses_a_kubeconfig_larger_than_256_kib() -> None:
    with pytest.raises(KubeconfigRejected, match="256 KiB"):
        validate_kubeconfig(kubeconfig() + "#" * (256 * 1024))


def test_it_never_quotes_the_kubeconfig_in_a_yaml_error() -> None:
    broken = kubeconfig().replace("users:", f"users: [{SECRET}")
    with pytest.raises(KubeconfigRejected) as error:
        validate_kubeconfig(broken)
    assert SECRET not in str(error.value) and "Line 10, column 7" in str(error.value)


def test_it_checks_the_context_cluster_user_and_server() -> None:
    assert validate_kubeconfig(kubeconfig(), "other")
    with pytest.raises(KubeconfigRejected, match="no context named 'missing'"):
        validate_kubeconfig(kubeconfig(), "missing")
    with pytest.raises(KubeconfigRejected, match="server URL"):
        validate_kubeconfig(kubeconfig(server="ftp://x"))
    with pytest.raises(KubeconfigRejected, match="mapping"):
        validate_kubeconfig("- a list")


def test_it_shows_the_server_without_credentials() -> None:
    text = kubeconfig(server="https://admin:pw@10.0.0.1:6443")
    assert server_of(text) == "https://10.0.0.1:6443"
