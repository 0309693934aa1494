//! The macros' compile-time diagnostics, against the .stderr snapshots in tests/ui.
//! Regenerate them with `TRYBUILD=overwrite cargo test --test ui` and read every diff.
//!
//! trybuild runs cargo: where the toolchain that built this test is missing (a staged
//! binary on a CUDA machine) the test says so and passes, unless `CUFOLD_CI` is set (CI
//! sets it, so there it cannot be skipped).

#[test]
fn diagnostics_point_at_the_offending_code() {
    if !std::path::Path::new(env!("CARGO")).exists() {
        assert!(
            std::env::var_os("CUFOLD_CI").is_none(),
            "CUFOLD_CI is set but cargo ({}) is missing",
            env!("CARGO")
        );
        eprintln!(
            "SKIPPED: no cargo at {}; the UI tests need the Rust toolchain",
            env!("CARGO")
        );
        return;
    }
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
