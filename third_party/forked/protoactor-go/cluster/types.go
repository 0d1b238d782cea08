package cluster

type GossipMemberStates = map[string]*GossipMemberState

type GossipKeyValues = map[string]*GossipKeyValue
