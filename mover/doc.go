// Package mover changes a partition's raft group to match the catalog's
// placement, learner first: it owns the order of membership changes and
// the rule that decides when a new replica has caught up.
//
// The partition's leader calls Mover.Step again and again (level
// triggered: each call reads the group's state afresh and makes at most
// one membership change), with the catalog's placement of the group:
//
//  1. A replica that must join (placed by a move or a replacement, or on
//     a node that lost its data) is added as a non-voter. A voter that
//     must join again (it lost its data, so its acknowledged entries are
//     gone) is first removed, when the voters left can still commit.
//  2. Once it has acknowledged every entry the leader held when it was
//     first seen in the group, and stays within LagMax entries of the
//     leader for HoldFor, the caller records in the catalog that it
//     caught up (the replica then stops abstaining from elections), and
//     the next step promotes it to voter, once its own answers say it no
//     longer abstains (its node applied the record; until then it is
//     woken, so that a quiesced learner answers again). Recording first means a leader
//     lost in between leaves a learner that the next leader checks and
//     promotes, never a voter that abstains.
//  3. Only when every placed replica is a voter and recorded caught up are
//     servers that are not placed removed, the leader itself last, after
//     handing leadership to a placed voter.
//
// Every membership change is conditioned on the configuration index it
// was decided from, so a retry never applies twice, and raft itself never
// runs two changes of one group at once. New learners are bounded per
// leader node (Config.CatchUpsMax).
//
// The package must never read the catalog, propose catalog commands, or
// keep anything on disk: a new leader starts from the group's state and
// the placement, and decides again.
package mover
