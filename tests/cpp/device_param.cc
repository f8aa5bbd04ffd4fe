#include "device_param.h"

namespace infiniop_test {
INSTANTIATE_TEST_SUITE_P(All, DeviceTest, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });
}  // namespace infiniop_test
