package remote

import "fmt"

var (
	DefaultSerializerID int32
	serializers         []Serializer
)

func init() {
	RegisterSerializer(newProtoSerializer())
	RegisterSerializer(newJsonSerializer())
}

func RegisterSerializer(serializer Serializer) {
	serializers = append(serializers, serializer)
}

type Serializer interface {
	Serialize(msg interface{}) ([]byte, error)
	Deserialize(typeName string, bytes []byte) (interface{}, error)
	GetTypeName(msg interface{}) (string, error)
}

func Serialize(message interface{}, serializerID int32) ([]byte, string, error) {
	res, err := serializers[serializerID].Serialize(message)
	if err != nil {
		return nil, "", err
	}
	typeName, err := serializers[serializerID].GetTypeName(message)
	if err != nil {
		return nil, "", err
	}
	return res, typeName, nil
}

func Deserialize(message []byte, typeName string, serializerID int32) (interface{}, error) {
	// Hoplite patch: the serializer id comes from a peer; upstream indexed
	// with it unchecked (a panic that ended the process).
	if serializerID < 0 || int(serializerID) >= len(serializers) {
		return nil, fmt.Errorf("unknown serializer %d", serializerID)
	}
	return serializers[serializerID].Deserialize(typeName, message)
}

// RootSerializable is the root level in-process representation of a message
type RootSerializable interface {
	// Serialize returns the on-the-wire representation of the message
	//   Message -> IRootSerialized -> ByteString
	Serialize() (RootSerialized, error)
}

// RootSerialized is the root level on-the-wire representation of a message
type RootSerialized interface {
	// Deserialize returns the in-process representation of a message
	//   ByteString -> IRootSerialized -> Message
	Deserialize() (RootSerializable, error)
}
