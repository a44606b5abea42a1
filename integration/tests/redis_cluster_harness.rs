//! The Redis Cluster test harness (`tests/support/redis_cluster.rs`) against real
//! `redis-server` nodes: a cluster starts whole, `MOVED` is followed, a slot migrates with `ASK`
//! while it moves, a killed master's replica takes over, and no node outlives a panicking test.
//! `--nocapture` prints the start and failover times.

#[path = "support/redis_cluster.rs"]
mod redis_cluster;

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis_cluster::{ClusterNode, RedisCluster};

/// One cluster at a time: with a node timeout of half a second, several clusters' nodes on a
/// 2-core machine could starve one of them into a failover nobody asked for.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn one_cluster() -> MutexGuard<'static, ()> {
    ONE_CLUSTER.lock().unwrap_or_else(PoisonError::into_inner)
}

fn start() -> RedisCluster {
    let cluster = RedisCluster::start();
    println!("cluster started in {:?}", cluster.started_in());
    cluster
}

fn info(cluster: &RedisCluster, node: &ClusterNode, section: &str) -> String {
    cluster
        .command(node, redis::cmd("INFO").arg(section))
        .expect("INFO")
}

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .to_owned()
}

fn get(
    cluster: &RedisCluster,
    node: &ClusterNode,
    key: &str,
) -> redis::RedisResult<Option<String>> {
    cluster.command(node, redis::cmd("GET").arg(key))
}

/// The redirect a node answered with: `"MOVED"` or `"ASK"`, the slot, and the node's address.
fn redirect(reply: redis::RedisResult<Option<String>>) -> (String, u16, String) {
    let error = reply.expect_err("a redirect");
    let code = error.code().unwrap_or_else(|| panic!("{error}")).to_owned();
    let (address, slot) = error.redirect_node().unwrap_or_else(|| panic!("{error}"));
    (code, slot, address.to_owned())
}

fn moved(slot: u16, to: &ClusterNode) -> (String, u16, String) {
    ("MOVED".to_owned(), slot, to.address())
}

fn ask(slot: u16, to: &ClusterNode) -> (String, u16, String) {
    ("ASK".to_owned(), slot, to.address())
}

fn is_running(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("kill(1) runs")
        .success()
}

#[test]
fn a_cluster_starts_whole_and_no_node_outlives_a_panicking_test() {
    let _one = one_cluster();
    let cluster = start();
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.urls().len(), 6);
    assert_eq!(
        cluster.seed_urls(),
        masters.iter().map(ClusterNode::url).collect::<Vec<_>>()
    );
    for master in &masters {
        let replica = cluster.replica_of(master).expect("a replica");
        let replication = info(&cluster, &replica, "replication");
        assert_eq!(field(&replication, "role"), "slave");
        assert_eq!(field(&replication, "master_port"), master.port.to_string());
        assert_eq!(field(&replication, "master_link_status"), "up");
        let replication = info(&cluster, master, "replication");
        assert_eq!(field(&replication, "connected_slaves"), "1");
    }
    for node in cluster.nodes() {
        let info: String = cluster
            .command(&node, redis::cmd("CLUSTER").arg("INFO"))
            .unwrap();
        assert_eq!(field(&info, "cluster_state"), "ok", "node {}", node.port);
        assert_eq!(
            field(&info, "cluster_slots_ok"),
            "16384",
            "node {}",
            node.port
        );
        assert_eq!(field(&info, "cluster_size"), "3", "node {}", node.port);
    }
    // Shards in slot order, as redis-cli splits them.
    assert_eq!(cluster.node_for_slot(0), masters[0]);
    assert_eq!(cluster.node_for_slot(5460), masters[0]);
    assert_eq!(cluster.node_for_slot(5461), masters[1]);
    assert_eq!(cluster.node_for_slot(16383), masters[2]);
    // The server's CRC16: "foo" is in slot 12182 (the Redis Cluster specification's example).
    assert_eq!(cluster.slot_of("foo"), 12182);
    assert_eq!(cluster.slot_of("{foo}:anything"), 12182);

    let pids: Vec<u32> = cluster.nodes().iter().map(|node| node.pid).collect();
    assert!(pids.iter().all(|&pid| is_running(pid)));
    let panicked = std::thread::spawn(move || {
        let _cluster = cluster;
        panic!("meant: a test that fails with a cluster running (its nodes die as it unwinds)");
    })
    .join();
    assert!(panicked.is_err());
    let running: Vec<u32> = pids.into_iter().filter(|&pid| is_running(pid)).collect();
    assert!(running.is_empty(), "still running: {running:?}");
}

#[test]
fn a_key_written_through_one_node_is_read_through_another_by_following_moved() {
    let _one = one_cluster();
    let cluster = start();
    let key = "flowgate:moved";
    let slot = cluster.slot_of(key);
    let owner = cluster.node_for_slot(slot);
    let elsewhere: Vec<ClusterNode> = cluster
        .masters()
        .into_iter()
        .filter(|master| *master != owner)
        .collect();
    // Asked directly, a master that does not serve the key names the one that does.
    assert_eq!(
        redirect(get(&cluster, &elsewhere[0], key)),
        moved(slot, &owner)
    );
    assert_eq!(cluster.cli(&elsewhere[0], &["SET", key, "written"]), "OK");
    assert_eq!(cluster.cli(&elsewhere[1], &["GET", key]), "written");
    assert_eq!(
        get(&cluster, &owner, key).unwrap().as_deref(),
        Some("written")
    );
}

#[test]
fn a_migrating_slot_asks_for_moved_keys_and_then_belongs_to_the_target() {
    let _one = one_cluster();
    let cluster = start();
    let keys: Vec<String> = (0..25)
        .map(|i| format!("{{flowgate:migrate}}:{i}"))
        .collect();
    let slot = cluster.slot_of(&keys[0]);
    let from = cluster.node_for_slot(slot);
    let to = cluster
        .masters()
        .into_iter()
        .find(|master| *master != from)
        .unwrap();
    for key in &keys {
        let _: () = cluster
            .command(&from, redis::cmd("SET").arg(key).arg(key))
            .unwrap();
    }

    let migration = cluster.begin_migration(slot, &from, &to);
    assert_eq!(cluster.move_keys(&migration, 10), 10);
    // Mid-way: the source answers for the keys it still holds and sends the others to the
    // target with ASK; the slot is still the source's.
    let mut held = 0;
    let mut asked = Vec::new();
    for key in &keys {
        match get(&cluster, &from, key) {
            Ok(value) => {
                assert_eq!(value.as_deref(), Some(key.as_str()));
                held += 1;
            }
            reply => {
                assert_eq!(redirect(reply), ask(slot, &to), "{key}");
                asked.push(key);
            }
        }
    }
    assert_eq!((held, asked.len()), (15, 10));
    assert_eq!(cluster.node_for_slot(slot), from);
    assert_eq!(
        redirect(get(&cluster, &from, "{flowgate:migrate}:new")),
        ask(slot, &to)
    );
    // redis-cli -c follows the ASK (ASKING, then the command on the target).
    assert_eq!(cluster.cli(&from, &["GET", asked[0]]), *asked[0]);

    assert_eq!(cluster.finish_migration(&migration), 15);
    assert_eq!(cluster.node_for_slot(slot), to);
    assert_eq!(redirect(get(&cluster, &from, &keys[0])), moved(slot, &to));
    for key in &keys {
        assert_eq!(
            get(&cluster, &to, key).unwrap().as_deref(),
            Some(key.as_str())
        );
    }
}

#[test]
fn a_killed_master_is_replaced_by_its_replica_within_seconds() {
    let _one = one_cluster();
    let cluster = start();
    let key = "flowgate:failover";
    let master = cluster.node_for_slot(cluster.slot_of(key));
    // Replicated before the kill (WAIT: one replica acknowledged, within a second). WAIT
    // waits for the writes of its own connection, so both go on one: on a connection of its
    // own (as `command` opens), WAIT returned at once, and a master killed under load before
    // the write reached its replica left the promoted replica without the key.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", master.port)).unwrap();
    let mut connection = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("kept")
        .query(&mut connection)
        .unwrap();
    let acknowledged: u64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(acknowledged, 1);
    drop(connection);
    let shard = cluster.masters().iter().position(|m| *m == master).unwrap();

    let killed = cluster.kill_master(shard);
    assert_eq!(killed.master, master);
    assert!(!is_running(master.pid));
    let took = cluster.wait_for_failover(&killed);
    println!("failover took {took:?}");
    assert!(took < Duration::from_secs(8), "failover took {took:?}");

    let promoted = killed.replica;
    let topology = cluster.topology();
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "{masters:?} in\n{topology}");
    assert_eq!(masters[shard], promoted, "{masters:?} in\n{topology}");
    assert_eq!(cluster.nodes().len(), 5);
    assert_eq!(cluster.replica_of(&promoted), None, "in\n{topology}");
    assert_eq!(
        field(&info(&cluster, &promoted, "replication"), "role"),
        "master"
    );
    let slot = cluster.slot_of(key);
    assert_eq!(cluster.node_for_slot(slot), promoted, "in\n{topology}");
    assert_eq!(
        get(&cluster, &promoted, key).unwrap().as_deref(),
        Some("kept")
    );
}
