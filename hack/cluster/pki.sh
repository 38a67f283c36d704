# Certificates and kubeconfigs of the local cluster (sourced by up.sh). One CA signs
# the apiserver's serving certificate and one client certificate per component; the
# kubelet serves with the self-signed certificate it makes itself.

gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }

# sign <name> <subject> [subjectAltName]: $PKI/<name>.{key,crt}, signed by the CA.
sign() {
  local name=$1 subj=$2 san=${3:-}
  gen_key "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig <name>: $STATE/<name>.kubeconfig authenticating with $PKI/<name>.{crt,key}.
kubeconfig() {
  local name=$1
  cat >"$STATE/$name.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: outbox-local
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $name
  user:
    client-certificate: $PKI/$name.crt
    client-key: $PKI/$name.key
contexts:
- name: outbox-local
  context: {cluster: outbox-local, user: $name}
current-context: outbox-local
YAML
}

make_pki() {
  PKI=$STATE/pki
  [ -f "$PKI/done" ] && return 0
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  gen_key "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=outbox-local-ca" -days 365 -out "$PKI/ca.crt" 2>/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  sign apiserver "/CN=kube-apiserver" \
    "IP:$NODE_IP,IP:$SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  sign admin "/O=system:masters/CN=outbox-local-admin"
  sign controller-manager "/CN=system:kube-controller-manager"
  sign scheduler "/CN=system:kube-scheduler"
  sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  sign kube-proxy "/CN=system:kube-proxy"
  for n in admin controller-manager scheduler kubelet kube-proxy; do kubeconfig "$n"; done
  touch "$PKI/done"
}
