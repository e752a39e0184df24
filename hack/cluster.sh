#!/usr/bin/env bash
# cluster.sh up | down | status: a one-node Kubernetes on this machine, for the
# node end-to-end suite (hack/node-e2e.sh) and for trying deploy/ without a cluster.
#
#   sudo hack/cluster.sh up       # prints the admin kubeconfig's path last
#   export KUBECONFIG=/var/lib/baton-cluster/admin.kubeconfig
#   sudo hack/cluster.sh down     # stops everything and removes what up made
#
# It needs root, Linux, Go, openssl and curl, and from Debian's packages
# containerd, runc, containernetworking-plugins, iptables and conntrack (up
# installs them with apt-get when they are missing). Everything else it builds
# here from the pinned tool module hack/tools/kube-apiserver, once per machine,
# into the cache directory hack/testenv.sh uses: etcd and kube-apiserver (by
# testenv.sh itself), then the kubelet, kube-controller-manager, kube-proxy and
# kube-scheduler, one at a time (each a few minutes of CPU on an idle machine; the
# kubelet took 70 minutes of wall clock on a 2-core machine under a load of 30). The images (a pause
# image, baton:dev from cmd/baton and baton-sharded:dev from examples/sharded)
# are static binaries written as docker-archive tars by hack/nodeimage and
# imported into containerd: no registry and no Docker engine are needed.
#
# The cluster: etcd on 127.0.0.1, kube-apiserver on the node's address :6443
# (Node,RBAC authorization, service-account tokens signed by a key made here, the
# `kubernetes` Service at 10.0.0.1), the controller manager and the scheduler, a
# kubelet (cgroupfs driver; cgroup v1 allowed with failCgroupV1: false), containerd
# with its own socket and state (restrict_oom_score_adj = true: runc cannot set the
# negative OOM score the kubelet asks for without CAP_SYS_RESOURCE) and kube-proxy
# (iptables). Pods get addresses in 10.244.0.0/24 on the bridge baton0, with
# routes to the node's address and the Service range only (no default route); a chain
# BATON-NODE drops what pods would send out of, or receive from, the machine's
# other interfaces, so pod and Service traffic stays on the machine. The CNI
# plugins from Debian do not enforce NetworkPolicy.
#
# up is idempotent: a component already running is left alone. down stops every
# process up started, removes the containers, unmounts what the kubelet and
# containerd mounted, deletes the bridge, the network namespaces and the iptables
# chains (KUBE-*, CNI-*, BATON-NODE), restores ip_forward, and removes the state
# directory; the built binaries stay in the cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kube_version=v1.37.2
bin= # the cache directory of the binaries: hack/testenv.sh's, set by build_all
state="${BATON_CLUSTER_DIR:-/var/lib/baton-cluster}"
run=/run/baton-cluster
pki=$state/pki
logs=$state/log
sock=$run/containerd/containerd.sock
service_cidr=10.0.0.0/24
service_ip=10.0.0.1
pod_cidr=10.244.0.0/24
bridge=baton0
node=$(hostname | tr '[:upper:]' '[:lower:]')
apiserver_port=6443
etcd_port=2479

log() { echo "cluster: $*" >&2; }
die() {
  log "$*"
  exit 1
}

node_ip() {
  if [ -n "${BATON_NODE_IP:-}" ]; then
    echo "$BATON_NODE_IP"
    return
  fi
  ip -4 route get 1.0.0.0 | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}'
}

# ---- packages and binaries ----

need_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# build_kube NAME PACKAGE builds a Kubernetes binary from the pinned tool module,
# with its version set, into the cache directory, once. It builds in a copy of
# the module: the kubelet and kube-proxy need go.sum lines the API server does
# not (GOFLAGS=-mod=mod adds them to the copy).
build_kube() {
  local name=$1 pkg=$2
  if [ -x "$bin/$name" ]; then
    return
  fi
  log "building $name into $bin (once per machine, several minutes)"
  local mod v=k8s.io/component-base/version
  mod=$(mktemp -d)
  cp "$root/hack/tools/kube-apiserver/go.mod" "$root/hack/tools/kube-apiserver/go.sum" "$root/hack/tools/kube-apiserver/tools.go" "$mod/"
  local minor=${kube_version#v1.}
  minor=${minor%%.*}
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z" \
    -o "$bin/$name.tmp" "$pkg")
  rm -rf "$mod"
  mv "$bin/$name.tmp" "$bin/$name"
}

build_all() {
  bin=$("$root/hack/testenv.sh" | tail -n 1)
  build_kube kubelet k8s.io/kubernetes/cmd/kubelet
  build_kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
  build_kube kube-proxy k8s.io/kubernetes/cmd/kube-proxy
  build_kube kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
}

# ---- certificates and kubeconfigs ----

# cert NAME SUBJECT EXTENSIONS signs a key and certificate with the cluster's CA.
cert() {
  local name=$1 subj=$2 ext=$3
  [ -f "$pki/$name.crt" ] && return
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  printf '%b\n' "$ext" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 365 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
}

make_pki() {
  mkdir -p "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -subj "/CN=baton-cluster-ca" \
      -days 365 -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$pki/ca.crt" 2>/dev/null
  fi
  local client="keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth"
  local names="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  cert apiserver "/CN=kube-apiserver" \
    "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=$names,IP:$service_ip,IP:$(node_ip),IP:127.0.0.1"
  cert admin "/O=system:masters/CN=kubernetes-admin" "$client"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  cert kubelet "/O=system:nodes/CN=system:node:$node" "$client"
  cert controller-manager "/CN=system:kube-controller-manager" "$client"
  cert scheduler "/CN=system:kube-scheduler" "$client"
  cert proxy "/CN=system:kube-proxy" "$client"
  [ -f "$pki/sa.key" ] || openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  [ -f "$pki/sa.pub" ] || openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  for u in admin kubelet controller-manager scheduler proxy; do
    kubeconfig "$u" >"$state/$u.kubeconfig"
  done
}

# kubeconfig NAME prints a kubeconfig authenticating with NAME's certificate.
kubeconfig() {
  local b64='base64 -w0'
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: baton
  cluster:
    server: https://$(node_ip):$apiserver_port
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $($b64 <"$pki/$1.crt")
    client-key-data: $($b64 <"$pki/$1.key")
contexts:
- name: baton
  context: {cluster: baton, user: $1}
current-context: baton
EOF
}

# ---- processes ----

running() { # running NAME: its pid file names a live process
  [ -f "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null
}

# start NAME COMMAND...: starts COMMAND in its own session unless NAME runs.
start() {
  local name=$1
  shift
  if running "$name"; then
    return
  fi
  setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
  log "started $name (pid $!, log $logs/$name.log)"
}

# wait_for WHAT SECONDS COMMAND...: runs COMMAND every half second until it succeeds.
wait_for() {
  local what=$1 limit=$2 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      die "$what not ready after $limit s; see $logs"
    fi
    sleep 0.5
  done
}

apiserver_ready() {
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://$(node_ip):$apiserver_port/readyz" >/dev/null
}

# api PATH: GET on the API server as the admin.
api() {
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://$(node_ip):$apiserver_port$1"
}

start_control_plane() {
  start etcd "$bin/etcd" --name default --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((etcd_port + 1))"
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --advertise-address "$(node_ip)" --bind-address "$(node_ip)" --secure-port "$apiserver_port" \
    --cert-dir "$state/apiserver" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --service-cluster-ip-range "$service_cidr" \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key"
  wait_for kube-apiserver 120 apiserver_ready
  local kc=$state/controller-manager.kubeconfig
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kc" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" --bind-address 127.0.0.1 \
    --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key"
  kc=$state/scheduler.kubeconfig
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kc" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" --bind-address 127.0.0.1 --leader-elect=false
}

# put FILE writes its input to FILE unless FILE holds it already: kube-proxy
# exits when its configuration file is written, even with the same content.
put() {
  local tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then
    rm -f "$tmp"
  else
    mv "$tmp" "$1"
    chmod 644 "$1"
  fi
}

write_node_configs() {
  mkdir -p "$state/cni/net.d" "$run/containerd"
  put "$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run/containerd/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  put "$state/cni/net.d/10-baton.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "baton",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "dataDir": "$state/cni/ipam",
              "routes": [{"dst": "$(node_ip)/32"}, {"dst": "$service_cidr"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  put "$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podCIDR: $pod_cidr
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
podLogsDir: $state/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  put "$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $pod_cidr
hostnameOverride: $node
clientConnection: {kubeconfig: $state/proxy.kubeconfig}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0}
EOF
}

# isolate keeps pod traffic on the machine: nothing from the pod range leaves by
# another interface than the bridge, nothing comes in to it from one.
isolate() {
  iptables -N BATON-NODE 2>/dev/null || iptables -F BATON-NODE
  iptables -A BATON-NODE -s "$pod_cidr" ! -o "$bridge" -j DROP
  iptables -A BATON-NODE -d "$pod_cidr" ! -i "$bridge" -j DROP
  iptables -C FORWARD -j BATON-NODE 2>/dev/null || iptables -I FORWARD 1 -j BATON-NODE
}

start_node() {
  write_node_configs
  [ -f "$state/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward >"$state/ip_forward.before"
  isolate
  start containerd containerd --config "$state/containerd.toml"
  wait_for containerd 30 ctr --address "$sock" version
  import_images
  start kubelet "$bin/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$state/kubelet" --hostname-override "$node" --node-ip "$(node_ip)" --cert-dir "$state/kubelet-pki"
  start kube-proxy "$bin/kube-proxy" --config "$state/kube-proxy.yaml"
  wait_for "the node $node" 120 node_ready
}

node_ready() {
  api "/api/v1/nodes/$node" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

# ---- images ----

import_images() {
  local images=$state/images
  mkdir -p "$images"
  go build -C "$root" -o "$images/nodeimage" ./hack/nodeimage
  local spec name tag pkg path
  for spec in "pause registry.k8s.io/pause:3.6 ./hack/nodeimage/pause /pause" \
    "baton baton:dev ./cmd/baton /baton" \
    "baton-sharded baton-sharded:dev ./examples/sharded /sharded"; do
    read -r name tag pkg path <<<"$spec"
    (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$images/$name" "$pkg")
    "$images/nodeimage" -o "$images/$name.tar" -tag "$tag" -bin "$images/$name" -path "$path"
    ctr --address "$sock" -n k8s.io images import "$images/$name.tar" >/dev/null
    log "imported $tag"
  done
}

# ---- down ----

stop() { # stop NAME [SIGNAL]: signals NAME's process and waits for it to exit
  local name=$1 sig=${2:-TERM} pid i
  [ -f "$run/$name.pid" ] || return 0
  pid=$(cat "$run/$name.pid")
  kill -"$sig" "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$run/$name.pid"
}

remove_containers() {
  [ -S "$sock" ] || return 0
  local c
  for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
  done
  sleep 1
  for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
  done
  for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
  done
}

# kill_shims kills the containerd shims that outlived containerd: ours name
# our socket on their command line.
kill_shims() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "-address $sock "; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
}

# unmount_under DIR...: unmounts every mount at or below each DIR, deepest first.
unmount_under() {
  local d m
  for d in "$@"; do
    awk -v d="$d" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
}

# delete_chains drops every rule that jumps to a chain named KUBE-*, CNI-* or
# BATON-NODE, then those chains, in every table, for IPv4 and IPv6.
delete_chains() {
  local ipt table rule chain
  for ipt in iptables ip6tables; do
    command -v $ipt >/dev/null || continue
    for table in filter nat mangle raw; do
      { $ipt -t $table -S 2>/dev/null | grep -E -- '^-A .* -j (KUBE-|CNI-|BATON-NODE)' | grep -Ev '^-A (KUBE-|CNI-|BATON-NODE)' || true; } |
        while read -r rule; do
          eval "$ipt -t $table ${rule/-A/-D}" 2>/dev/null || true
        done
      for chain in $($ipt -t $table -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-|BATON-NODE$)/ {print $2}'); do
        $ipt -t $table -F "$chain" 2>/dev/null || true
      done
      for chain in $($ipt -t $table -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-|BATON-NODE$)/ {print $2}'); do
        $ipt -t $table -X "$chain" 2>/dev/null || true
      done
    done
  done
}

down() {
  stop kube-controller-manager
  stop kube-scheduler
  stop kubelet
  stop kube-proxy
  remove_containers
  stop containerd
  kill_shims
  stop kube-apiserver
  stop etcd
  unmount_under "$state" "$run"
  local ns
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  ip link delete "$bridge" 2>/dev/null || true
  # libcni's cache of our network's results, and the kubelet's links to our
  # containers' logs.
  rm -f /var/lib/cni/results/baton-*
  find /var/log/containers -maxdepth 1 -lname "$state/*" -delete 2>/dev/null || true
  delete_chains
  if [ -f "$state/ip_forward.before" ]; then
    cat "$state/ip_forward.before" >/proc/sys/net/ipv4/ip_forward
  fi
  rm -rf "$state" "$run"
  log "down"
}

# ---- status ----

status() {
  local name rc=0
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy; do
    if running "$name"; then
      echo "$name: running (pid $(cat "$run/$name.pid"))"
    else
      echo "$name: stopped"
      rc=1
    fi
  done
  if [ $rc = 0 ] && node_ready; then
    echo "node $node: Ready"
    echo "kubeconfig: $state/admin.kubeconfig"
  fi
  return $rc
}

up() {
  [ "$(id -u)" = 0 ] || die "up needs root (containerd, the kubelet, iptables)"
  local t0=$SECONDS
  need_packages
  build_all
  mkdir -p "$state" "$logs" "$run"
  make_pki
  start_control_plane
  start_node
  log "up in $((SECONDS - t0)) s; node $node Ready"
  echo "$state/admin.kubeconfig"
}

case "${1:-}" in
up) up ;;
down)
  [ "$(id -u)" = 0 ] || die "down needs root"
  down
  ;;
status) status ;;
*)
  echo "usage: hack/cluster.sh up | down | status" >&2
  exit 2
  ;;
esac
