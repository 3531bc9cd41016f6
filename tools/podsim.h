/* SPDX-License-Identifier: Apache-2.0 */
/* shardtool podsim (tools/podsim.c). */
#ifndef PF_TOOLS_PODSIM_H
#define PF_TOOLS_PODSIM_H

/*! shardtool podsim: argv[0] is "podsim".  @return the exit status. */
int podsim_main(int argc, char **argv);

#endif
