"""SSH on both sides: key material, the unprivileged sshd, the launcher's client and the probe."""
