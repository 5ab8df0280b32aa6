#!/usr/bin/python3
"""SimGrid's own routes of a platform file, as JSON: the oracle of simgrid_routes.rs.

Usage: /usr/bin/python3 simgrid_routes.py PLATFORM.xml [MAX_HOSTS]

Loads the platform with SimGrid's Python bindings (Debian's python3-simgrid) and prints
one JSON object: {"host_count": the platform's hosts, "hosts": [names, sorted], "routes": [[source, destination,
[link names], latency in seconds], ...]} for every ordered pair of distinct hosts. A
platform of more than MAX_HOSTS hosts (default 64) is sampled: MAX_HOSTS hosts spread
evenly over SimGrid's list, and every ordered pair of those. The link names are SimGrid's
as they are (the Rust side says which pseudo-links it leaves out of a hop count).
"""

import json
import sys

import simgrid


def main():
    platform = sys.argv[1]
    max_hosts = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    engine = simgrid.Engine(["simgrid_routes", "--log=root.thres:critical"])
    engine.load_platform(platform)
    hosts = sorted(engine.all_hosts, key=lambda host: host.name)
    host_count = len(hosts)
    if len(hosts) > max_hosts:
        step = len(hosts) / max_hosts
        hosts = [hosts[int(index * step)] for index in range(max_hosts)]
    routes = []
    for source in hosts:
        for destination in hosts:
            if source is destination:
                continue
            links, latency = source.route_to(destination)
            routes.append([source.name, destination.name, [link.name for link in links], latency])
    json.dump({"host_count": host_count, "hosts": [host.name for host in hosts], "routes": routes}, sys.stdout)


if __name__ == "__main__":
    main()
