package com.example.shop;

import feign.micrometer.MicrometerCapability;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Feign's own client timer ({@code feign.Client}, {@code feign_Client_seconds_count} on
 * {@code /actuator/prometheus}): one sample per request the client sends, a retry's every
 * attempt and every read timeout or broken connection included (tagged {@code exception_name}).
 *
 * <p>Spring Cloud OpenFeign registers only {@code MicrometerObservationCapability}
 * ({@code http_client_requests_seconds}) by itself, and in feign-micrometer 13.6 that records
 * answered requests only: a request that timed out is never counted (OpenFeign/feign#2566), and
 * in a gateway outage those are the calls that matter. Spring Cloud OpenFeign adds every
 * {@code Capability} bean to its clients.
 */
@Configuration
public class ClientMetrics {

    @Bean
    MicrometerCapability feignClientMetrics(MeterRegistry registry) {
        return new MicrometerCapability(registry);
    }
}
