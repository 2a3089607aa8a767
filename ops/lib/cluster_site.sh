# ops/lib/cluster_site.sh: the layout of an ops/cluster cluster, sourced
# by ops/cluster: every node's ports and groups, its configuration
# (write_configs), inventories (inventory_load), the rendered site of each
# host (render_site, site_install), and the placement of nodes on netlab
# hosts (netlab_place, place_nodes). Reads ops/cluster's settings (dir,
# port, sequencers, tapes, partitions, matchers, ...); defines functions
# only.

# seq_port J K: seq-J's listen (K=0), retrans (K=1) or raft (K=2) port.
seq_port() {
	if [ "$1" -eq 1 ]; then
		case $2 in 0) echo $((port + 100)) ;; 1) echo $((port + 101)) ;; 2) echo $((port + 104)) ;; esac
	else
		echo $((port + 120 + 3 * ($1 - 2) + $2))
	fi
}
# matcher_port I: matcher-I's exec_retrans port.
matcher_port() {
	if [ "$1" -le 9 ]; then echo $((port + 110 + $1)); else echo $((port + 150 + $1)); fi
}
# rec_port K: rec-K's retrans port; rcv_port K: rcv-K's.
rec_port() { echo $((port + 200 + $1)); }
rcv_port() { echo $((port + 300 + $1)); }
# rec_list I: every recorder's retrans address, the list starting at
# recorder (I mod N) + 1 (receiver I's: the receivers' first requests
# spread over the recorders); empty without recorders.
rec_list() {
	local k l=""
	[ "$recorders" -gt 0 ] || return 0
	for k in $(seq 0 $((recorders - 1))); do
		l+="${l:+,}127.0.0.1:$(rec_port $(( ($1 + k) % recorders + 1 )))"
	done
	echo "$l"
}
# feed_port I: matcher-I's [feed] retrans port.
feed_port() { echo $((port + 50 + $1)); }
# part_locate P: the stock locate of partition P's first symbol.
part_locate() {
	local k n=1
	for k in "${!SYMBOLS[@]}"; do [ $((k % partitions)) -ge "$1" ] || n=$((n + 1)); done
	echo "$n"
}
# exec_port P: partition P's execution multicast group port.
exec_port() {
	if [ "$1" -eq 0 ]; then echo $((port + 103)); else echo $((port + 144 + $1)); fi
}
# part_matchers P: the matcher numbers of partition P.
part_matchers() { seq $(($1 * matchers + 1)) $((($1 + 1) * matchers)); }
# part_retrans P: partition P's replicas' exec_retrans as a comma list.
part_retrans() {
	local i l=""
	for i in $(part_matchers "$1"); do l+="${l:+,}127.0.0.1:$(matcher_port "$i")"; done
	echo "$l"
}
# part_symbols P: partition P's symbols (round robin).
SYMBOLS=(AAPL MSFT AMZN GOOG META NVDA TSLA INTC)
part_symbols() {
	local k l=""
	for k in "${!SYMBOLS[@]}"; do [ $((k % partitions)) -ne "$1" ] || l+="${l:+ }${SYMBOLS[$k]}"; done
	echo "$l"
}

# seq_list K [T]: port K of every sequencer of tape T (default 0) as a
# comma list, in node order: tape T's group is seq-(TS+1)..seq-(TS+S).
seq_list() {
	local j l="" t=${2:-0}
	for j in $(seq $((t * sequencers + 1)) $(((t + 1) * sequencers))); do
		l+="${l:+,}127.0.0.1:$(seq_port "$j" "$1")"
	done
	echo "$l"
}
# Tape T's multicast group on network A (B: tape_group_b_of), session.
tape_group_of() { if [ "$1" -eq 0 ]; then echo 239.255.0.1:$((port + 102)); else echo 239.255.0.$((16 + $1)):$((port + 102)); fi; }
tape_group_b_of() { if [ "$1" -eq 0 ]; then echo 239.255.1.1:$((port + 102)); else echo 239.255.1.$((16 + $1)):$((port + 102)); fi; }
tape_session_of() { if [ "$1" -eq 0 ]; then echo TAPE; else echo "TAP$1"; fi; }
# part_tape P: the tape partition P's commands go to.
part_tape() { echo $(($1 % tapes)); }
# seq_tape NODE: the tape of sequencer NODE, from its config (tape 0's
# sets no tape_session).
seq_tape() {
	local t
	t=$(sed -n 's/^tape_session = TAP\([1-9]\)$/\1/p' "$dir/$1.conf" 2>/dev/null)
	echo "${t:-0}"
}

write_configs() {
	local p=$port i j q t listens retranses peers
	listens=$(seq_list 0) retranses=$(seq_list 1)
	# the logins TRADR1/pw1, TRADR2/pw2, TRADR3/pw3, their passwords
	# hashed (lockstepctl passwd): a plaintext file is warned about
	local pw
	pw=$(bin lockstepctl) || exit 2
	{
		echo "# lockstep gateway credentials: LOGIN = HASH FIRM [cancel_on_disconnect]"
		echo "# (HASH: lockstepctl passwd LOGIN FIRM prints the line)"
		echo "[logins]"
		echo pw1 | "$pw" passwd TRADR1 FRMA
		echo pw2 | "$pw" passwd TRADR2 FRMB
		echo pw3 | "$pw" passwd TRADR3 FRMA
	} >"$dir/logins.conf" || die "lockstepctl passwd failed"
	common="[node]
state_dir = STATE
log_level = info
log_timestamps = yes
cluster = $cluster
key_file = $dir/cluster.key
"
	for j in $(seq 1 "$nseqs"); do
		t=$(( (j - 1) / sequencers )) peers=$(seq_list 2 $(( (j - 1) / sequencers )))
		printf '%s' "${common/STATE/$dir/seq-$j}" >"$dir/seq-$j.conf"
		cat >>"$dir/seq-$j.conf" <<-EOF2
		name = seq-$j
		[sequencer]
		listen = 127.0.0.1:$(seq_port "$j" 0)
		retrans = 127.0.0.1:$(seq_port "$j" 1)
		tape_group = $(tape_group_of "$t")
		tape_iface = 127.0.0.1
		gateways = 127.0.0.1
		EOF2
		[ "$t" -eq 0 ] || echo "tape_session = $(tape_session_of "$t")" >>"$dir/seq-$j.conf"
		[ "$ab" -eq 0 ] || cat >>"$dir/seq-$j.conf" <<-EOF2
		tape_group_b = $(tape_group_b_of "$t")
		tape_iface_b = 127.0.0.1
		EOF2
		# A group of one is the single-node sequencer: no peers at all.
		[ "$sequencers" -eq 1 ] || cat >>"$dir/seq-$j.conf" <<-EOF2
		node_id = $(( (j - 1) % sequencers ))
		peers = $peers
		election_min = 150ms
		election_max = 300ms
		raft_heartbeat = 50ms
		EOF2
	done
	for k in $(seq 1 "$recorders"); do
		printf '%s' "${common/STATE/$dir/rec-$k}" >"$dir/rec-$k.conf"
		cat >>"$dir/rec-$k.conf" <<-EOF2
		name = rec-$k
		[recorder]
		tape_group = 239.255.0.1:$((p + 102))
		tape_iface = 127.0.0.1
		upstream = $retranses
		retrans = 127.0.0.1:$(rec_port "$k")
		$(ab_keys "tape_group_b = 239.255.1.1:$((p + 102))" "tape_iface_b = 127.0.0.1")
		EOF2
		[ "$receivers" -eq 0 ] || [ "$repair" -eq 0 ] || cat >>"$dir/rec-$k.conf" <<-EOF2
		repair_group = 239.255.2.1:$((p + 102))
		repair_ask = no
		repair_answer = yes
		EOF2
	done
	for k in $(seq 1 "$receivers"); do
		printf '%s' "${common/STATE/$dir/rcv-$k}" >"$dir/rcv-$k.conf"
		cat >>"$dir/rcv-$k.conf" <<-EOF2
		name = rcv-$k
		[recorder]
		tape_group = 239.255.0.1:$((p + 102))
		tape_iface = 127.0.0.1
		upstream = $(rec_list "$k")$([ "$repair" -eq 0 ] || echo ",$retranses")
		retrans = 127.0.0.1:$(rcv_port "$k")
		$([ "$repair" -eq 0 ] || echo "repair_group = 239.255.2.1:$((p + 102))")
		request_delay = $([ "$repair" -eq 0 ] && echo 2ms || echo 20ms)
		fsync = none
		rcvbuf = 4M
		reorder_bytes = 1M
		batch = 16
		$(ab_keys "tape_group_b = 239.255.1.1:$((p + 102))" "tape_iface_b = 127.0.0.1")
		EOF2
	done
	for q in $(seq 0 $((partitions - 1))); do
		for i in $(part_matchers "$q"); do
			printf '%s' "${common/STATE/$dir/matcher-$i}" >"$dir/matcher-$i.conf"
			cat >>"$dir/matcher-$i.conf" <<-EOF2
			name = matcher-$i
			[matcher]
			partition = $q
			tape_group = $(tape_group_of "$(part_tape "$q")")
			tape_session = $(tape_session_of "$(part_tape "$q")")
			tape_iface = 127.0.0.1
			tape_retrans = $(seq_list 1 "$(part_tape "$q")")
			tape_recorders = $(rec_list "$i")
			exec_group = 239.255.0.2:$(exec_port "$q")
			exec_retrans = 127.0.0.1:$(matcher_port "$i")
			symbols = $(part_symbols "$q")
			max_shares = 1000000
			replicas = $matchers
			replica = $(( (i - 1) % matchers ))
			replica_hosts = 127.0.0.1
			$(ab_keys "tape_group_b = $(tape_group_b_of "$(part_tape "$q")")" \
				"exec_group_b = 239.255.1.2:$(exec_port "$q")" "tape_iface_b = 127.0.0.1")
			[feed]
			a_group = 239.255.0.5:$(exec_port "$q")
			b_group = 239.255.0.6:$(exec_port "$q")
			retrans = 127.0.0.1:$(feed_port "$i")
			glimpse = 127.0.0.1:$(matcher_port "$i")
			logins = $dir/logins.conf
			locate_base = $(part_locate "$q")
			EOF2
		done
	done
	for i in $(seq 1 "$gateways"); do
		printf '%s' "${common/STATE/$dir/gw-$i}" >"$dir/gw-$i.conf"
		cat >>"$dir/gw-$i.conf" <<-EOF2
		name = gw-$i
		[gateway]
		ouch_listen = 127.0.0.1:$((p + i - 1))
		sequencer = $listens
		tape_group = 239.255.0.1:$((p + 102))
		tape_iface = 127.0.0.1
		tape_retrans = $retranses
		tape_recorders = $(rec_list "$i")
		exec_group = 239.255.0.2:$(exec_port 0)
		exec_retrans = $(part_retrans 0)
		credentials = $dir/logins.conf
		$(ab_keys "tape_group_b = 239.255.1.1:$((p + 102))" \
			"exec_group_b = 239.255.1.2:$(exec_port 0)" "tape_iface_b = 127.0.0.1")
		EOF2
		# One partition: the gateway's configuration of before partitions.
		[ "$partitions" -eq 1 ] && continue
		cat >>"$dir/gw-$i.conf" <<-EOF2
		partitions = $partitions
		symbols = $(part_symbols 0)
		EOF2
		[ "$tapes" -eq 1 ] || echo "tapes = $tapes" >>"$dir/gw-$i.conf"
		for q in $(seq 1 $((partitions - 1))); do
			cat >>"$dir/gw-$i.conf" <<-EOF2
			[partition$q]
			symbols = $(part_symbols "$q")
			exec_group = 239.255.0.2:$(exec_port "$q")
			exec_retrans = $(part_retrans "$q")
			$(ab_keys "exec_group_b = 239.255.1.2:$(exec_port "$q")")
			EOF2
			[ "$tapes" -eq 1 ] || echo "tape = $(part_tape "$q")" >>"$dir/gw-$i.conf"
		done
		for t in $(seq 1 $((tapes - 1))); do
			cat >>"$dir/gw-$i.conf" <<-EOF2
			[tape$t]
			sequencer = $(seq_list 0 "$t")
			tape_group = $(tape_group_of "$t")
			tape_session = $(tape_session_of "$t")
			tape_retrans = $(seq_list 1 "$t")
			$(ab_keys "tape_group_b = $(tape_group_b_of "$t")")
			EOF2
		done
	done
}

# ---- inventories --------------------------------------------------------
# inventory_load FILE: its settings into the cluster's, its hosts into
# DIR/inventory.placement ("NODE HOST ADDRESS ADDRESS_B", B "-" when none).
inventory_load() {
	local f=$1 kw name addr b t nodes n i c gws=0 seqs=0 mats=0 recs=0 rcvs=0 nb=0 nh=0
	[ -r "$f" ] || die "--inventory: cannot read $f"
	: >"$dir/inventory.placement"
	while read -r kw name addr rest; do
		case $kw in
		""|\#*) continue ;;
		cluster) cluster=$name ;;
		port) port=$name ;;
		partitions) partitions=$name ;;
		tapes) tapes=$name ;;
		host)
			[[ $addr =~ ^[0-9]+(\.[0-9]+){3}$ ]] || die "$f: host $name: no address"
			b=- nodes=()
			for t in $rest; do
				if [[ $t =~ ^[0-9]+(\.[0-9]+){3}$ ]] && [ "$b" = - ] && [ ${#nodes[@]} -eq 0 ]; then b=$t
				elif [[ $t =~ ^(seq|gw|matcher|rec|rcv)-[1-9][0-9]*$ ]]; then nodes+=("$t")
				else die "$f: host $name: '$t' is neither network B's address nor a node"; fi
			done
			nh=$((nh + 1)); [ "$b" = - ] || nb=$((nb + 1))
			for n in ${nodes[@]+"${nodes[@]}"}; do
				! grep -q "^$n " "$dir/inventory.placement" || die "$f: $n on two hosts"
				echo "$n $name $addr $b" >>"$dir/inventory.placement"
				case $n in seq-*) seqs=$((seqs + 1)) ;; gw-*) gws=$((gws + 1)) ;;
				matcher-*) mats=$((mats + 1)) ;; rec-*) recs=$((recs + 1)) ;; rcv-*) rcvs=$((rcvs + 1)) ;; esac
			done ;;
		*) die "$f: '$kw': want cluster, port, partitions, tapes or host" ;;
		esac
	done <"$f"
	for t in seq:$seqs gw:$gws matcher:$mats rec:$recs rcv:$rcvs; do
		for i in $(seq 1 "${t#*:}"); do
			grep -q "^${t%%:*}-$i " "$dir/inventory.placement" || die "$f: ${t%%:*}-$i is missing (nodes are numbered from 1 without holes)"
		done
	done
	[ "$seqs" -ge 1 ] && [ "$gws" -ge 1 ] && [ "$mats" -ge 1 ] || die "$f: a site needs a sequencer, a gateway and a matcher"
	[[ $tapes =~ ^[1-4]$ ]] && [ $((seqs % tapes)) -eq 0 ] && [ "$partitions" -ge "$tapes" ] ||
		die "$f: $seqs sequencers do not make $tapes groups of equal size, or fewer partitions than tapes"
	[[ $partitions =~ ^[1-8]$ ]] && [ $((mats % partitions)) -eq 0 ] ||
		die "$f: $mats matchers do not make $partitions partitions of equal replicas"
	[ "$nb" -eq 0 ] || [ "$nb" -eq "$nh" ] || die "$f: network B: every host has an address there, or none"
	gateways=$gws sequencers=$((seqs / tapes)) matchers=$((mats / partitions)) recorders=$recs receivers=$rcvs
	nseqs=$seqs
	nmatchers=$mats
	ab=$([ "$nb" -gt 0 ] && echo 1 || echo 0)
}

# render_conf NODE FILE: DIR/NODE.conf as its host's /etc/lockstep holds
# it (state under /var/lib/lockstep, the key and logins in /etc/lockstep,
# logs without timestamps: the journal stamps them).
render_conf() {
	sed -e "s|^state_dir = .*|state_dir = /var/lib/lockstep/$1|" \
		-e "s|^key_file = .*|key_file = /etc/lockstep/cluster.key|" \
		-e "s|^log_timestamps = yes\$|log_timestamps = no|" \
		-e "s#^\(credentials\|logins\) = $dir/logins.conf\$#\1 = /etc/lockstep/logins.conf#" \
		"$dir/$1.conf" >"$2"
	! grep -q "$dir" "$2" || die "render: $2 still names $dir"
}

# render_site OUT: the configs in DIR, placed (place_nodes), as each host's
# /etc/lockstep under OUT/HOST/etc/lockstep, and OUT/HOST/units.
render_site() {
	local o=$1 n h a b role etc
	rm -rf "$o"
	while read -r n h a b; do
		role=$(role_of "$n")
		etc=$o/$h/etc/lockstep
		mkdir -p "$etc"
		render_conf "$n" "$etc/$role-$n.conf"
		install -m 0640 "$dir/cluster.key" "$etc/cluster.key"
		install -m 0640 "$dir/logins.conf" "$etc/logins.conf"
		echo "lockstep-$role@$n.service" >>"$o/$h/units"
	done <"$dir/placement"
}

# ab_keys LINE...: the lines, one a line, with --ab; nothing without.
ab_keys() { [ "$ab" -eq 0 ] || printf '%s\n' "$@"; }

# ---- --netlab: DIR/placement has a line "NODE NETNS ADDRESS" per node.
netns_of() { [ -f "$dir/placement" ] && awk -v n="$1" '$1 == n { print $2 }' "$dir/placement" || true; }

# netlab_place: puts the nodes on the netlab's hosts and rewrites their
# configs: each 127.0.0.1:PORT becomes the address of the host of the node
# that owns PORT, tape_iface the node's own host's address.
netlab_place() {
	local hosts n i j k ns f expr="" own need=$((1 + gateways + nseqs + recorders + receivers + nmatchers))
	hosts=$("$ops_root/ops/netlab" --name "$netlab" hosts 2>/dev/null) ||
		die "--netlab: no netlab '$netlab' is up (ops/netlab --name $netlab up $need)"
	[ "$(wc -l <<<"$hosts")" -ge $need ] ||
		die "--netlab: $gateways gateway(s), $nseqs sequencer(s) and $nmatchers matcher(s) need $need hosts; netlab '$netlab' has $(wc -l <<<"$hosts")"
	# host I: NETNS ADDRESS ADDRESS_B ("-": no network B, netlab up without --ab)
	nl_host() { sed -n "$1p" <<<"$hosts" | awk '{ print $2, $3, ($4 == "" ? "-" : $4) }'; }
	: >"$dir/placement"
	for i in $(seq 1 "$gateways"); do echo "gw-$i $(nl_host $((1 + i)))" >>"$dir/placement"; done
	for j in $(seq 1 "$nseqs"); do echo "seq-$j $(nl_host $((1 + gateways + j)))" >>"$dir/placement"; done
	for k in $(seq 1 "$recorders"); do echo "rec-$k $(nl_host $((1 + gateways + nseqs + k)))" >>"$dir/placement"; done
	for i in $(seq 1 "$nmatchers"); do echo "matcher-$i $(nl_host $((1 + gateways + nseqs + recorders + i)))" >>"$dir/placement"; done
	for k in $(seq 1 "$receivers"); do echo "rcv-$k $(nl_host $((1 + gateways + nseqs + recorders + nmatchers + k)))" >>"$dir/placement"; done
	place_nodes
	echo "$netlab" >"$dir/netlab"
}

# place_nodes: rewrites every node's config for the host DIR/placement puts
# it on ("NODE HOST ADDRESS [ADDRESS_B]"): each 127.0.0.1:PORT becomes the
# address of the host of the node that owns PORT, tape_iface the node's own
# host's address (tape_iface_b its network B address).
place_nodes() {
	local n i j k ns f expr="" own ownb
	nl_addr() { awk -v n="$1" '$1 == n { print $3 }' "$dir/placement"; }
	for i in $(seq 1 "$gateways"); do expr+="s/127\.0\.0\.1:$((port + i - 1))\b/$(nl_addr "gw-$i"):$((port + i - 1))/g;"; done
	for j in $(seq 1 "$nseqs"); do
		for k in 0 1 2; do
			expr+="s/127\.0\.0\.1:$(seq_port "$j" "$k")\b/$(nl_addr "seq-$j"):$(seq_port "$j" "$k")/g;"
		done
	done
	for k in $(seq 1 "$recorders"); do
		expr+="s/127\.0\.0\.1:$(rec_port "$k")\b/$(nl_addr "rec-$k"):$(rec_port "$k")/g;"
	done
	for k in $(seq 1 "$receivers"); do
		expr+="s/127\.0\.0\.1:$(rcv_port "$k")\b/$(nl_addr "rcv-$k"):$(rcv_port "$k")/g;"
	done
	for i in $(seq 1 "$nmatchers"); do
		expr+="s/127\.0\.0\.1:$(matcher_port "$i")\b/$(nl_addr "matcher-$i"):$(matcher_port "$i")/g;"
		expr+="s/127\.0\.0\.1:$(feed_port "$i")\b/$(nl_addr "matcher-$i"):$(feed_port "$i")/g;"
	done
	# members only: the sequencers take commands from the gateways' hosts,
	# each replica votes with its partition's replicas' hosts
	local gw_hosts="" part_hosts expr_own
	for i in $(seq 1 "$gateways"); do gw_hosts+="${gw_hosts:+,}$(nl_addr "gw-$i")"; done
	while read -r n ns own ownb; do
		case $n in
		seq-*) expr_own="s/^gateways = 127\.0\.0\.1\$/gateways = $gw_hosts/" ;;
		matcher-*)
			part_hosts=""
			for i in $(part_matchers $(( (${n#matcher-} - 1) / matchers ))); do
				part_hosts+="${part_hosts:+,}$(nl_addr "matcher-$i")"
			done
			expr_own="s/^replica_hosts = 127\.0\.0\.1\$/replica_hosts = $part_hosts/" ;;
		*) expr_own="" ;;
		esac
		[ -z "$netlab" ] || [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] ||
			die "--netlab: host $ns (for $n) already runs processes (another cluster?): ops/netlab --name $netlab status"
		f=$dir/$n.conf
		if [ "$ab" -eq 1 ]; then
			[ -n "$ownb" ] && [ "$ownb" != - ] || die "--ab: host $ns has no network B address (ops/netlab up N --ab)"
			sed -i "s/^tape_iface_b = 127\.0\.0\.1\$/tape_iface_b = $ownb/" "$f"
		fi
		sed -i -e "$expr" -e "s/^tape_iface = 127\.0\.0\.1\$/tape_iface = $own/" ${expr_own:+-e "$expr_own"} "$f"
		! grep -q '127\.0\.0\.1' "$f" || die "$f still names 127.0.0.1"
	done <"$dir/placement"
}

# netlab_render: the placed configs of up --netlab (without --inventory)
# go the way of a site's: rendered per host (host hN of netlab L is "hN")
# and installed as each host's /etc/lockstep, so the netlab runs the files
# a real site would. A node started again takes DIR/NODE.conf rendered
# anew (an edit there, as a drill's test fault, takes effect).
netlab_render() {
	sed "s/^\([^ ]*\) $netlab-\([^ ]*\) /\1 \2 /" "$dir/placement" >"$dir/inventory.placement"
	cp "$dir/inventory.placement" "$dir/placement"
	render_site "$dir/site"
	site_install
	touch "$dir/rerender"
}

# site_install: the rendered site (DIR/site) onto the netlab's hosts: each
# host's etc/lockstep where `ip netns exec` shows it as /etc/lockstep.
site_install() {
	local n ns a b h want hosts
	hosts=$("$ops_root/ops/netlab" --name "$netlab" hosts 2>/dev/null) ||
		die "--inventory: no netlab '$netlab' is up"
	: >"$dir/placement"
	while read -r n h a b; do
		ns=$netlab-$h
		want=$(awk -v ns="$ns" '$2 == ns { print $3 }' <<<"$hosts")
		[ -n "$want" ] || die "--inventory: host $h: netlab '$netlab' has no host $ns"
		[ "$want" = "$a" ] || die "--inventory: host $h is $a in the inventory, $want on the netlab"
		echo "$n $ns $a $b" >>"$dir/placement"
		[ -d "/etc/netns/$ns/lockstep" ] && [ -f "/etc/netns/$ns/lockstep/.lockstep-cluster" ] &&
			! grep -qx "$dir" "/etc/netns/$ns/lockstep/.lockstep-cluster" &&
			die "--inventory: /etc/netns/$ns/lockstep belongs to the cluster in $(cat "/etc/netns/$ns/lockstep/.lockstep-cluster")"
		rm -rf "/etc/netns/$ns/lockstep"
		mkdir -p "/etc/netns/$ns"
		cp -a "$dir/site/$h/etc/lockstep" "/etc/netns/$ns/lockstep"
		echo "$dir" >"/etc/netns/$ns/lockstep/.lockstep-cluster"
	done <"$dir/inventory.placement"
	# ip netns exec bind-mounts /etc/netns/NS/lockstep on /etc/lockstep
	[ -d /etc/lockstep ] || mkdir -p /etc/lockstep
	echo "$netlab" >"$dir/netlab"
	touch "$dir/inventory"
}

# site_uninstall: what site_install put in /etc/netns.
site_uninstall() {
	local n ns rest
	[ -f "$dir/inventory" ] && [ -f "$dir/placement" ] || return 0
	while read -r n ns rest; do
		if [ -f "/etc/netns/$ns/lockstep/.lockstep-cluster" ] &&
			grep -qx "$dir" "/etc/netns/$ns/lockstep/.lockstep-cluster"; then
			rm -rf "/etc/netns/$ns/lockstep"
			rmdir "/etc/netns/$ns" 2>/dev/null || true
		fi
	done <"$dir/placement"
}
