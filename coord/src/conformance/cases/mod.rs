//! The cases, one file per topic. Each is an `async fn(Arc<B>)` registered
//! in [`all_cases`] under its own name, which is the test's name in every
//! run (simulator and real server alike).
//!
//! Rules every case follows, so that it holds on any faithful backend:
//! - it works only under `Backend::root()`, which is fresh and empty;
//! - it never depends on the order of `get_children` (it sorts);
//! - it compares zxids only with each other, never with absolute values, and
//!   never assumes the format of a session id;
//! - it never sleeps to let things settle: it waits for an event with a
//!   bound, or proves the absence of one with a round trip;
//! - it does not test cross-client simultaneity (reads may be stale).

mod create;
mod delete;
mod ephemeral;
mod limits;
mod multi;
mod multi_read;
mod ordering;
mod reconnect;
mod sequential;
mod session;
mod set_data;
mod stat;
mod validation;
mod watch_children;
mod watch_data;
mod watch_persistent;
mod watch_rules;

use super::{Backend, Case};

macro_rules! cases {
    ($($module:ident :: $name:ident),* $(,)?) => {
        /// Every case of the suite, in a fixed order.
        pub fn all_cases<B: Backend>() -> Vec<Case<B>> {
            vec![$(Case { name: stringify!($name), run: |b| Box::pin($module::$name(b)) }),*]
        }
    };
}

cases![
    // Creating nodes and reading them back.
    create::create_returns_path_and_get_data_reads_it,
    create::create_sets_every_stat_field_of_the_new_node,
    create::create_updates_the_parent_stat,
    create::create_without_parent_fails_no_node,
    create::create_existing_node_fails_node_exists,
    create::create_under_ephemeral_fails_no_children_for_ephemerals,
    create::reads_of_a_missing_node_fail_no_node_or_return_none,
    // Stat fields and zxids.
    stat::every_write_gets_a_higher_zxid,
    stat::zxids_increase_across_sessions,
    stat::ephemeral_owner_is_the_creating_session,
    stat::get_children_returns_names_and_the_parent_stat,
    stat::stat_cversion_counts_child_creates_and_deletes,
    stat::count_descendants_counts_every_level_below_the_node,
    // Deleting.
    delete::delete_removes_the_node_and_updates_the_parent,
    delete::delete_missing_node_fails_no_node,
    delete::delete_node_with_children_fails_not_empty,
    delete::delete_with_wrong_version_fails_bad_version,
    delete::delete_checks_version_before_children,
    delete::delete_without_version_accepts_any_version,
    // Setting data.
    set_data::set_data_bumps_version_and_mzxid_not_czxid,
    set_data::set_data_missing_node_fails_no_node,
    set_data::set_data_with_wrong_version_fails_bad_version,
    set_data::set_data_with_same_bytes_still_bumps_version,
    // Sequential nodes.
    sequential::sequential_names_append_a_ten_digit_counter,
    sequential::sequence_counter_advances_on_plain_creates,
    sequential::sequence_counter_never_reuses_after_delete,
    sequential::sequence_counter_belongs_to_the_parent,
    sequential::ephemeral_sequential_node_is_named_and_owned,
    sequential::sequential_prefix_may_end_with_slash,
    sequential::sequential_prefix_may_end_with_dot_or_dot_dot,
    sequential::sequential_name_taken_by_a_plain_node_fails_node_exists,
    // Ephemeral nodes.
    ephemeral::ephemerals_are_deleted_when_their_session_closes,
    ephemeral::ephemerals_are_deleted_when_their_session_expires,
    ephemeral::ephemerals_of_a_session_are_deleted_in_one_step,
    ephemeral::closing_a_session_leaves_other_sessions_ephemerals,
    // Reconnection within the session timeout.
    reconnect::a_short_cut_keeps_the_session_and_its_ephemerals,
    reconnect::a_watch_set_before_a_cut_fires_after_reconnect_if_its_node_changed,
    reconnect::an_exists_watch_on_a_node_created_and_deleted_during_a_cut_is_lost,
    reconnect::a_request_issued_while_disconnected_is_sent_after_reconnect,
    reconnect::a_write_applied_whose_reply_was_lost_fails_with_connection_loss,
    // Session end.
    session::ops_after_close_fail_session_closed,
    session::ops_after_expiry_fail_session_expired,
    // Data watches (exists, get_data).
    watch_data::exists_watch_on_missing_node_fires_on_create,
    watch_data::exists_watch_on_existing_node_fires_on_change_and_delete,
    watch_data::get_data_watch_fires_node_data_changed_on_set,
    watch_data::get_data_watch_fires_node_deleted_on_delete,
    watch_data::failed_reads_of_a_missing_node_leave_no_watch,
    watch_data::data_watch_is_not_fired_by_child_changes,
    // Child watches (get_children).
    watch_children::child_watch_fires_on_child_create_and_delete,
    watch_children::child_watch_ignores_a_child_data_change,
    watch_children::set_data_does_not_fire_child_watches,
    watch_children::child_watch_on_deleted_node_fires_node_deleted,
    watch_children::child_watch_is_not_fired_by_grandchildren,
    // Rules shared by every watch.
    watch_rules::watches_are_one_shot_until_rearmed,
    watch_rules::changes_before_rearm_are_not_reported_one_by_one,
    watch_rules::same_watch_registered_several_times_fires_once,
    watch_rules::data_and_child_watch_on_deleted_node_fire_one_node_deleted,
    watch_rules::data_and_child_watches_fire_independently,
    watch_rules::create_fires_node_event_before_parent_event,
    watch_rules::delete_fires_node_event_before_parent_event,
    watch_rules::watch_fires_only_for_the_session_that_set_it,
    // Persistent and persistent-recursive watches (addWatch).
    watch_persistent::persistent_watch_fires_on_every_change_of_its_node,
    watch_persistent::persistent_watch_on_a_missing_node_fires_on_create,
    watch_persistent::recursive_watch_reports_the_subtree_on_the_changed_path,
    watch_persistent::recursive_watch_reports_its_own_node,
    watch_persistent::recursive_watch_ignores_nodes_outside_its_subtree,
    watch_persistent::persistent_and_one_shot_watches_on_one_node_report_each_change_once,
    watch_persistent::one_shot_watch_set_before_a_persistent_one_fires_once_with_it,
    watch_persistent::recursive_watch_survives_a_one_shot_watch_on_its_own_node,
    watch_persistent::recursive_and_one_shot_watches_below_it_report_each_change_once,
    watch_persistent::same_mode_twice_and_an_ancestor_watch_report_each_change_once,
    watch_persistent::add_watch_of_the_other_mode_on_a_watched_node_is_refused,
    watch_persistent::own_write_reports_through_a_persistent_watch_before_its_reply,
    watch_persistent::multi_reports_through_persistent_watches_once_it_applied,
    watch_persistent::persistent_watch_survives_a_reconnect,
    watch_persistent::persistent_watch_events_during_a_cut_are_lost,
    watch_persistent::persistent_watch_goes_with_its_session,
    watch_persistent::add_watch_refuses_an_invalid_path,
    // Per-session ordering.
    ordering::watch_event_arrives_before_a_read_that_shows_the_change,
    ordering::own_write_event_arrives_before_the_write_reply,
    ordering::events_arrive_in_the_order_of_the_changes,
    ordering::concurrent_creates_of_one_session_apply_in_issue_order,
    ordering::concurrent_dependent_ops_of_one_session_all_succeed,
    ordering::sync_then_read_sees_another_sessions_write,
    // Multi.
    multi::multi_applies_every_op_and_returns_their_results,
    multi::multi_ops_share_one_zxid,
    multi::multi_ops_see_the_effects_of_earlier_ops,
    multi::multi_failing_check_rolls_back_earlier_ops,
    multi::multi_reports_the_first_failing_op,
    multi::multi_check_passes_on_right_version_only,
    multi::multi_check_without_a_version_asks_only_for_the_node,
    multi::multi_empty_succeeds,
    multi::multi_fires_watches_once_it_succeeded,
    multi::multi_sequential_create_returns_the_actual_name,
    // Multi-read.
    multi_read::get_data_many_answers_each_path_as_get_data_does,
    multi_read::get_data_many_leaves_no_watch,
    multi_read::get_data_many_is_checked_before_sending,
    multi_read::get_children_many_answers_each_path_as_get_children_does,
    multi_read::get_children_many_leaves_no_watch,
    multi_read::get_children_many_is_checked_before_sending,
    // Client-side validation.
    validation::invalid_paths_are_refused_naming_the_path,
    validation::trailing_slash_is_allowed_for_sequential_creates_only,
    validation::negative_versions_are_refused_with_bad_arguments,
    validation::invalid_op_in_multi_is_refused_with_its_index,
    // Size limits.
    limits::data_at_the_limit_is_accepted_and_one_byte_more_refused,
    limits::multi_over_the_request_limit_is_refused_before_sending,
    limits::create_or_set_data_over_the_request_limit_is_refused_before_sending,
    limits::oversized_children_listing_fails_and_session_survives,
];
