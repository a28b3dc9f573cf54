use zkdist_scenarios::mutant::Mutant;
use zkdist_scenarios::{ExploreConfig, Faults, explore};

#[test]
fn probe() {
    for mutant in [Mutant::MasterSkipsSyncs, Mutant::WorkerSkipsSyncs, Mutant::ClientSkipsSyncs] {
        for faults in [Faults::Latency, Faults::All] {
            let config = ExploreConfig { faults, mutant: Some(mutant), ..ExploreConfig::default() };
            let mut found = Vec::new();
            explore(0..400, &config, 2, false, |outcome| {
                if let Some(v) = outcome.violation { found.push((outcome.seed, v.invariant, v.detail.clone())); }
            });
            eprintln!("{mutant:?} {faults:?}: {} violations; first {:?}", found.len(), found.iter().take(3).collect::<Vec<_>>());
        }
    }
}
