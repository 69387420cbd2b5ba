"""Mininet's ``mn --custom`` file for SA-ATP: the topologies, the P4 switch and the host.

    mn --custom topologies/mn_custom.py --topo sa_atp_star,4 --switch sa_atp,target=embedded \
       --host ipv4only --controller none --arp

``mn`` reads the ``topos``, ``switches`` and ``hosts`` dictionaries below.
"""

from topologies.mininet_nodes import Ipv4OnlyHost, P4RuntimeSwitch
from topologies.mininet_topos import LeafSpineTopo, StarTopo

topos = {"sa_atp_star": StarTopo, "sa_atp_leaf_spine": LeafSpineTopo}
switches = {"sa_atp": P4RuntimeSwitch}
hosts = {"ipv4only": Ipv4OnlyHost}
