//! The spool on a real directory: atomic batches, exclusive claims, limits, unreadable files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use pi_observe_spool::{BatchMeta, Spool, SpoolConfig, fingerprint};

fn dir(name: &str) -> PathBuf {
    let d =
        std::env::temp_dir().join(format!("pi-spool-{name}-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn meta(items: u64) -> BatchMeta {
    BatchMeta::new("otlp", "traces", "http://127.0.0.1:4318/v1/traces", "http/protobuf", items)
}

fn batch_files(dir: &PathBuf) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_written_batch_is_listed_claimed_once_and_removed_when_delivered() {
    let d = dir("roundtrip");
    let spool = Spool::new(SpoolConfig::new(&d));
    spool.write(&meta(3), b"\x00body\nwith newline").unwrap();
    let pending = spool.pending(|m| m.sink == "otlp");
    assert_eq!(pending.len(), 1);
    assert!(spool.pending(|m| m.sink == "sentry").is_empty());

    let claimed = spool.claim(&pending[0]).unwrap();
    assert_eq!(claimed.body, b"\x00body\nwith newline");
    assert_eq!(claimed.meta.items, 3);
    assert!(claimed.meta.created_ms > 0);
    // A second claimant (another process, or another file handle here) cannot take it.
    let other = Spool::new(SpoolConfig::new(&d));
    assert!(other.claim(&other.pending(|_| true)[0]).is_none());

    spool.delivered(claimed);
    assert!(other.claim(&pending[0]).is_none(), "gone once delivered");
    assert!(spool.pending(|_| true).is_empty());
    let stats = spool.stats();
    assert_eq!(
        (stats.spooled_batches, stats.spooled_items, stats.delivered_batches, stats.delivered_items),
        (1, 3, 1, 3)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
    }
}

#[test]
fn a_batch_claimed_after_another_process_delivered_it_is_not_delivered_again() {
    let d = dir("race");
    let spool = Spool::new(SpoolConfig::new(&d));
    spool.write(&meta(1), b"x").unwrap();
    let listed_by_b = spool.pending(|_| true);
    let a = Spool::new(SpoolConfig::new(&d));
    let claimed = a.claim(&a.pending(|_| true)[0]).unwrap();
    a.delivered(claimed);
    assert!(spool.claim(&listed_by_b[0]).is_none());
}

#[test]
fn the_oldest_batches_go_first_past_the_size_cap_and_are_counted() {
    let d = dir("cap");
    let spool = Spool::new(SpoolConfig { max_bytes: 2_000, ..SpoolConfig::new(&d) });
    for i in 0..10u64 {
        let mut m = meta(i + 1);
        m.created_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64 + i;
        spool.write(&m, &[b'a'; 300]).unwrap();
    }
    let status = spool.status();
    assert!(status.bytes <= 2_000, "{status:?}");
    let stats = spool.stats();
    assert_eq!(stats.spooled_batches, 10);
    assert_eq!(stats.dropped_full_batches, 10 - status.batches);
    // The survivors are the newest: items 10, 9, …
    let kept: Vec<u64> = spool.pending(|_| true).iter().map(|p| p.meta.items).collect();
    assert_eq!(kept, ((11 - status.batches)..=10).collect::<Vec<_>>());
    assert_eq!(stats.dropped_full_items, (1..=(10 - status.batches)).sum::<u64>());
}

#[test]
fn batches_past_the_age_cap_are_removed_and_counted() {
    let d = dir("age");
    let spool = Spool::new(SpoolConfig { max_age: Duration::from_secs(3600), ..SpoolConfig::new(&d) });
    let mut old = meta(7);
    old.created_ms = 1_000; // 1970
    spool.write(&old, b"old").unwrap();
    spool.write(&meta(2), b"new").unwrap();
    let kept = spool.pending(|_| true);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].meta.items, 2);
    let stats = spool.stats();
    assert_eq!((stats.dropped_expired_batches, stats.dropped_expired_items), (1, 7));
}

#[test]
fn a_batch_file_aged_by_its_modification_time_counts_against_the_age_cap() {
    let d = dir("age-mtime");
    let spool = Spool::new(SpoolConfig { max_age: Duration::from_secs(3600), ..SpoolConfig::new(&d) });
    spool.write(&meta(5), b"touched").unwrap();
    spool.write(&meta(2), b"fresh").unwrap();
    // `touch -d '8 days ago'` on the first file: its name still says now.
    let first = d.join(&batch_files(&d)[0]);
    let eight_days_ago = std::time::SystemTime::now() - Duration::from_secs(8 * 86_400);
    std::fs::File::options().write(true).open(&first).unwrap().set_modified(eight_days_ago).unwrap();
    let oldest = spool.status().oldest_ms.unwrap();
    let expected = eight_days_ago.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(oldest.abs_diff(expected) < 1_000, "status names the older time: {oldest} vs {expected}");
    spool.enforce_limits(); // as a delivery pass starts
    let kept = spool.pending(|_| true);
    assert_eq!(kept.iter().map(|p| p.meta.items).collect::<Vec<_>>(), [2]);
    let stats = spool.stats();
    assert_eq!((stats.dropped_expired_batches, stats.dropped_expired_items), (1, 5));
}

#[test]
fn a_torn_file_is_set_aside_counted_and_named_once() {
    let d = dir("torn");
    let spool = Spool::new(SpoolConfig::new(&d));
    spool.write(&meta(1), b"0123456789").unwrap();
    spool.write(&meta(2), b"good").unwrap();
    let first = d.join(&batch_files(&d)[0]);
    let bytes = std::fs::read(&first).unwrap();
    std::fs::write(&first, &bytes[..bytes.len() - 4]).unwrap();
    std::fs::write(d.join("0000000000001-1-000000.batch"), b"not a header").unwrap();

    let pending = spool.pending(|_| true);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].meta.items, 2);
    let stats = spool.stats();
    assert_eq!(stats.unreadable, 2);
    assert_eq!(stats.diagnostics.len(), 2);
    assert!(stats.diagnostics.iter().any(|l| l.contains("torn") && l.contains(&first.display().to_string())));
    // Listed again (the next run): nothing new to name.
    let again = Spool::new(SpoolConfig::new(&d));
    assert_eq!(again.pending(|_| true).len(), 1);
    assert_eq!(again.stats().unreadable, 0);
    assert_eq!(again.status().unreadable, 2);
}

#[test]
fn a_refused_batch_waits_for_other_credentials() {
    let d = dir("auth");
    let spool = Spool::new(SpoolConfig::new(&d));
    spool.write(&meta(4), b"payload").unwrap();
    let old = fingerprint([("authorization", "Bearer old")]);
    let claimed = spool.claim(&spool.pending(|_| true)[0]).unwrap();
    spool.refused(claimed, &old).unwrap();
    let pending = spool.pending(|_| true);
    assert_eq!(pending.len(), 1);
    assert!(pending[0].meta.held_for(&old));
    assert!(!pending[0].meta.held_for(&fingerprint([("authorization", "Bearer new")])));
    let claimed = spool.claim(&pending[0]).unwrap();
    assert_eq!(claimed.body, b"payload");
    assert_eq!(spool.status().held, 1);
}

#[test]
fn a_temporary_file_left_by_a_killed_writer_is_never_a_batch() {
    let d = dir("tmp");
    let spool = Spool::new(SpoolConfig::new(&d));
    spool.write(&meta(1), b"whole").unwrap();
    std::fs::write(d.join(".0000000000002-9-000000.batch.tmp"), b"{\"v\":1,\"len\":99").unwrap();
    assert_eq!(spool.pending(|_| true).len(), 1);
    assert_eq!(spool.status().batches, 1);
    assert_eq!(spool.stats().unreadable, 0);
}

#[test]
fn a_spool_that_cannot_be_created_counts_the_failure() {
    let file = dir("blocked");
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let spool = Spool::new(SpoolConfig::new(file.join("spool")));
    assert!(spool.write(&meta(5), b"x").is_err());
    let stats = spool.stats();
    assert_eq!(stats.write_failed, 1);
    assert_eq!(stats.diagnostics.len(), 1);
}
