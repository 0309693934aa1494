//! Every configuration is checked where it is given, by its own `check` (no device needed),
//! with one message per setting whichever entry point meets it.

mod common;

use cufold::ops::Sum;
use cufold::reduce::ReduceConfig;
use cufold::scan::ScanConfig;
use cufold::segment::SegmentConfig;
use cufold::{Cpu, ErrorKind};

const BAD_BLOCKS: [u32; 6] = [0, 16, 48, 1000, 2048, u32::MAX];
const GOOD_BLOCKS: [u32; 6] = [32, 64, 128, 256, 512, 1024];

#[test]
fn scan_configs_are_checked_alone_and_inside_segment_configs() {
    assert!(ScanConfig::default().check().is_ok());
    for b in GOOD_BLOCKS {
        assert!(ScanConfig::default().block(b).check().is_ok(), "{b}");
        assert!(SegmentConfig::default()
            .scan(ScanConfig::default().block(b))
            .check()
            .is_ok());
    }
    for b in BAD_BLOCKS {
        let bad = ScanConfig::default().block(b);
        let e = bad.check().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfig);
        assert!(
            e.to_string().contains(&format!("ScanConfig::block({b})")),
            "{e}"
        );
        // Inside a segment configuration: the same error, word for word.
        let s = SegmentConfig::default().scan(bad).check().unwrap_err();
        assert_eq!((s.kind(), s.to_string()), (e.kind(), e.to_string()));
    }
}

#[test]
fn reduce_and_segment_configs_check_every_block_size() {
    assert!(ReduceConfig::default().check().is_ok());
    assert!(SegmentConfig::default().check().is_ok());
    for b in GOOD_BLOCKS {
        assert!(ReduceConfig::default()
            .block(b)
            .large_block(b)
            .check()
            .is_ok());
        let c = SegmentConfig::default()
            .block(b)
            .thread_block(b)
            .split_block(b);
        assert!(c.check().is_ok(), "{b}");
    }
    for b in BAD_BLOCKS {
        let cases = [
            (
                ReduceConfig::default().block(b).check(),
                "ReduceConfig::block",
            ),
            (
                ReduceConfig::default().large_block(b).check(),
                "ReduceConfig::large_block",
            ),
            (
                SegmentConfig::default().block(b).check(),
                "SegmentConfig::block",
            ),
            (
                SegmentConfig::default().thread_block(b).check(),
                "SegmentConfig::thread_block",
            ),
            (
                SegmentConfig::default().split_block(b).check(),
                "SegmentConfig::split_block",
            ),
        ];
        for (r, name) in cases {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig, "{name}");
            assert!(e.to_string().contains(&format!("{name}({b})")), "{e}");
        }
    }
}

#[test]
fn cpu_reduce_by_key_has_one_entry_a_run() {
    // The GPU's reduce_by_key_into writes nothing at or past the run count; the CPU returns
    // exactly the runs.
    let keys = [4u32, 4, 1, 1, 1, 4];
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let by = Cpu::new().reduce_by_key(&keys, &x, Sum).unwrap();
    assert_eq!(by.keys, [4, 1, 4]);
    assert_eq!(by.values, [3.0, 12.0, 6.0]);
    assert_eq!(by.lengths, [2, 3, 1]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_entry_points_refuse_bad_configs_with_the_config_message() {
    let gpu = common::gpu();
    let bad = ScanConfig::default().block(1000);
    let want = bad.check().unwrap_err().to_string();
    let e = gpu.scanner_with::<f32, _>(Sum, bad).unwrap_err();
    assert_eq!(e.to_string(), want);
    let seg = SegmentConfig::default().scan(bad);
    let e = gpu.segment_scanner_with::<f32, _>(Sum, seg).unwrap_err();
    assert_eq!(e.to_string(), want);
    let e = gpu.segment_reducer_with::<f32, _>(Sum, seg).unwrap_err();
    assert_eq!(e.to_string(), want);
    let bad = ReduceConfig::default().large_block(1000);
    let e = gpu.reducer_with::<f32, _>(Sum, bad).unwrap_err();
    assert_eq!(e.to_string(), bad.check().unwrap_err().to_string());
    let bad = SegmentConfig::default().split_block(48);
    let e = gpu.segment_reducer_with::<f32, _>(Sum, bad).unwrap_err();
    assert_eq!(e.to_string(), bad.check().unwrap_err().to_string());
    assert!(gpu
        .scanner_with::<f32, _>(Sum, ScanConfig::default().block(128))
        .is_ok());
}
