//! A handler's view of the layer's decision, as text: what tests compare across servers.
#![allow(dead_code)]

use flowgate::http::Ruling;

/// The ruling in one line: admitted or the refusing policy, every quota's cells left, the
/// tightest quota, and the dry run that would have refused; `no ruling` when none was attached.
pub fn describe(ruling: Option<&Ruling>) -> String {
    let Some(ruling) = ruling else {
        return "no ruling".into();
    };
    let quotas: Vec<String> = ruling
        .quotas()
        .iter()
        .map(|q| format!("{}:{}", q.by().policy(), q.gauge().remaining()))
        .collect();
    let refusal = ruling.refusal().map(|r| match r.policy() {
        Some(policy) => format!("refused by {policy}"),
        None => format!("refused {}", r.status().as_u16()),
    });
    format!(
        "{} quotas={} tightest={} dry_run={}",
        refusal.unwrap_or_else(|| "admitted".into()),
        quotas.join(","),
        ruling.tightest().map_or("-", |q| q.by().policy()),
        ruling.dry_run().map_or("-", |d| d.by().policy()),
    )
}
